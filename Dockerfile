# OmniForge service image. Build: docker build -t omniforge .
# Run: docker run -p 8000:8000 -e OMNIFORGE_ENV=production -e OMNIFORGE_JWT_SECRET=... \
#        -e OMNIFORGE_DATABASE_URL=postgresql+asyncpg://... omniforge
# The API reference's assets (Swagger UI, ReDoc) from the locked npm packages: /docs and /redoc
# load nothing from elsewhere.
FROM node:20-slim AS web
WORKDIR /src/web
COPY web/package.json web/package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY web/build.mjs ./
RUN node build.mjs

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
COPY --from=web /src/app/static ./app/static
RUN python -m venv /opt/omniforge \
    && /opt/omniforge/bin/pip install --no-cache-dir --upgrade pip \
    && /opt/omniforge/bin/pip install --no-cache-dir .

FROM python:3.11-slim
RUN useradd --system --create-home --home-dir /srv/omniforge omniforge
COPY --from=build /opt/omniforge /opt/omniforge
ENV PATH=/opt/omniforge/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    OMNIFORGE_DATA_DIR=/srv/omniforge/var
USER omniforge
WORKDIR /srv/omniforge
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=2)"
CMD ["omniforge", "serve", "--host", "0.0.0.0", "--port", "8000"]
