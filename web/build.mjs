// Writes the service's browser assets into app/static/ (git-ignored), where the service
// serves them under /static/: the API reference's vendored files, and the web console
// (web/console/, bundled by esbuild). Run after `npm ci` (scripts/_web.sh does both).
// Nothing here is fetched at run time: a page of the service loads only what this build wrote.
import { build } from "esbuild";
import {
  cpSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { gzipSync } from "node:zlib";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const target = join(here, "..", "app", "static");
const require = createRequire(import.meta.url);

// Package → the files a page needs, copied under static/vendor/<name>/ (licences included).
const VENDORED = {
  "swagger-ui-dist": {
    name: "swagger-ui",
    files: ["swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png", "LICENSE", "NOTICE"],
  },
  redoc: {
    name: "redoc",
    files: ["bundles/redoc.standalone.js", "bundles/redoc.standalone.js.LICENSE.txt", "LICENSE"],
  },
};

// What a vendored file would fetch from elsewhere at run time, replaced by what needs no
// network. A replacement that no longer matches fails the build: the upgrade needs a look.
const OFFLINE = {
  "vendor/redoc/redoc.standalone.js": [
    // ReDoc's "API docs by Redocly" link loads its logo from Redocly's CDN.
    ["https://cdn.redoc.ly/redoc/logo-mini.svg", "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg'/%3E"],
  ],
};

function packageDir(pkg) {
  return dirname(require.resolve(`${pkg}/package.json`));
}

// Built beside the target, then swapped in whole: the service never serves half a build.
const staging = `${target}.building`;
rmSync(staging, { recursive: true, force: true });
const versions = {};
for (const [pkg, { name, files }] of Object.entries(VENDORED)) {
  const source = packageDir(pkg);
  const destination = join(staging, "vendor", name);
  mkdirSync(destination, { recursive: true });
  for (const file of files) {
    cpSync(join(source, file), join(destination, file.split("/").pop()));
  }
  versions[pkg] = require(`${pkg}/package.json`).version;
}
for (const [file, replacements] of Object.entries(OFFLINE)) {
  const path = join(staging, file);
  let text = readFileSync(path, "utf8");
  for (const [online, offline] of replacements) {
    if (!text.includes(online)) {
      throw new Error(`${file} no longer holds ${online}: check what it fetches now`);
    }
    text = text.replaceAll(online, offline);
  }
  writeFileSync(path, text);
}
// The console: one script and one stylesheet, named by their content (cached for good), and
// the page that loads them (the service serves it at /console and every path under it).
const consoleDir = join(staging, "console");
const bundled = await build({
  entryPoints: { console: join(here, "console", "src", "main.jsx") },
  bundle: true,
  minify: true,
  format: "esm",
  target: ["es2020"],
  jsx: "automatic",
  jsxImportSource: "preact",
  entryNames: "[name]-[hash]",
  chunkNames: "[name]-[hash]",
  splitting: true, // pages that bring a library of their own load on demand
  outdir: consoleDir,
  legalComments: "linked",
  metafile: true,
  logLevel: "warning",
});
const outputs = Object.keys(bundled.metafile.outputs).map((path) => path.split("/").pop());
const script = outputs.find((name) => name.startsWith("console-") && name.endsWith(".js"));
const style = outputs.find((name) => name.startsWith("console-") && name.endsWith(".css"));
// The chunks the script imports at once are fetched beside it, not after it.
const entry = Object.entries(bundled.metafile.outputs).find(([path]) => path.endsWith(script))[1];
const preloads = entry.imports
  .filter((imported) => imported.kind === "import-statement")
  .map((imported) => imported.path.split("/").pop())
  .map((name) => `<link rel="modulepreload" href="__OMNIFORGE_ROOT__/static/console/${name}" />`);
const shell = readFileSync(join(here, "console", "index.html"), "utf8")
  .replace("__SCRIPT__", script)
  .replace("__STYLE__", style)
  .replace("<!-- __PRELOADS__ -->", preloads.join("\n    "));
writeFileSync(join(consoleDir, "index.html"), shell);
for (const pkg of ["preact", "chart.js", "diff"]) {
  // Read from the file: not every package exports its package.json.
  const manifest = join(here, "node_modules", pkg, "package.json");
  versions[pkg] = JSON.parse(readFileSync(manifest, "utf8")).version;
}

// A gzip copy of every script and stylesheet, which the service sends to browsers that
// accept it (the same bytes every time: compressed once here, not per request).
for (const entry of readdirSync(staging, { recursive: true, withFileTypes: true })) {
  if (entry.isFile() && /\.(js|css)$/.test(entry.name)) {
    const path = join(entry.parentPath ?? entry.path, entry.name);
    writeFileSync(`${path}.gz`, gzipSync(readFileSync(path), { level: 9 }));
  }
}

// Which versions were built (for people; the service checks the files themselves).
writeFileSync(join(staging, "manifest.json"), JSON.stringify({ versions }, null, 2) + "\n");
rmSync(target, { recursive: true, force: true });
renameSync(staging, target);
console.log(`web: the console and the assets of ${Object.keys(versions).join(", ")} written to app/static/`);
