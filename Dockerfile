# OmniForge service image. Build: docker build -t omniforge .
# Run: docker run -p 8000:8000 -e OMNIFORGE_ENV=production -e OMNIFORGE_JWT_SECRET=... \
#        -e OMNIFORGE_DATABASE_URL=postgresql+asyncpg://... omniforge
# The same bytes twice: every Python package comes from requirements/*.lock, each file checked
# against its SHA-256 (scripts/lock makes them); the npm packages from web/package-lock.json.
#
# Base images. NOT YET PINNED BY DIGEST: the digests could not be looked up where this file was
# written (no registry reachable), and a digest is never guessed. Pin them before relying on the
# image: `docker buildx imagetools inspect python:3.11-slim` (and node:20-slim) prints the
# index's `Digest: sha256:…`; set the defaults below to `python:3.11-slim@sha256:…` (and
# `node:20-slim@sha256:…`), or pass them per build with `--build-arg PYTHON_IMAGE=…`.
ARG PYTHON_IMAGE=python:3.11-slim
ARG NODE_IMAGE=node:20-slim

# The API reference's assets (Swagger UI, ReDoc) and the console from the locked npm packages:
# /docs, /redoc and /console load nothing from elsewhere.
FROM ${NODE_IMAGE} AS web
WORKDIR /src/web
COPY web/package.json web/package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY web/build.mjs ./
COPY web/console ./console
RUN node build.mjs

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
# Dependencies first, from the locks alone: this layer is rebuilt when a lock changes, not when
# the code does. --no-deps: a lock is complete, so nothing outside it is installed.
COPY requirements/runtime.lock requirements/build.lock ./requirements/
RUN python -m venv /opt/omniforge \
    && /opt/omniforge/bin/pip install --no-cache-dir --require-hashes --no-deps \
        --requirement requirements/runtime.lock \
    && python -m venv /opt/build \
    && /opt/build/bin/pip install --no-cache-dir --require-hashes --no-deps \
        --requirement requirements/build.lock
# Then the project itself, built by the locked build backend (no unpinned build environment)
# and installed without dependencies: they are all in the layer above.
COPY pyproject.toml README.md ./
COPY app ./app
COPY --from=web /src/app/static ./app/static
RUN /opt/build/bin/pip wheel --no-cache-dir --no-deps --no-build-isolation \
        --wheel-dir /tmp/wheels . \
    && /opt/omniforge/bin/pip install --no-cache-dir --no-deps /tmp/wheels/omniforge-*.whl

FROM ${PYTHON_IMAGE}
# A fixed numeric id: Kubernetes' runAsNonRoot can check it (deploy/kubernetes/ runs as it).
RUN groupadd --system --gid 10001 omniforge \
    && useradd --system --uid 10001 --gid 10001 --create-home --home-dir /srv/omniforge omniforge
COPY --from=build /opt/omniforge /opt/omniforge
ENV PATH=/opt/omniforge/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    OMNIFORGE_DATA_DIR=/srv/omniforge/var
USER 10001:10001
WORKDIR /srv/omniforge
# 8000: the API. 9090: /metrics when OMNIFORGE_METRICS_PORT=9090 (compose and the Kubernetes
# example set it), for the scraper on the internal network only: never publish it.
EXPOSE 8000 9090
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=2)"
CMD ["omniforge", "serve", "--host", "0.0.0.0", "--port", "8000"]
