// Writes the service's browser assets into app/static/ (git-ignored), where the service
// serves them under /static/. Run after `npm ci` (scripts/_web.sh does both). Nothing here
// is fetched at run time: a page of the service loads only what this build wrote.
import { cpSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
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
// Which versions were built (for people; the service checks the files themselves).
writeFileSync(join(staging, "manifest.json"), JSON.stringify({ versions }, null, 2) + "\n");
rmSync(target, { recursive: true, force: true });
renameSync(staging, target);
console.log(`web: assets of ${Object.keys(versions).join(", ")} written to app/static/`);
