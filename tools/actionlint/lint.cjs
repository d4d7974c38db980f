// Lints GitHub Actions workflow files with actionlint (its WebAssembly build): `node lint.cjs FILE...`.
// Prints one line per finding (file:line:column: message [kind]); exit 0 when clean, 1 on findings, 2 on bad usage.
"use strict";
const { readFileSync } = require("node:fs");
const { join } = require("node:path");
// Go's WebAssembly runtime needs globalThis.crypto, which Node.js has only from version 19 (Debian 12 ships 18).
globalThis.crypto ??= require("node:crypto").webcrypto;
// The linter module by its file: the package's entry points also load its CLI's colour library, an ES module that
// Node.js 18 cannot require.
const { runLint } = require(join(__dirname, "node_modules", "@tktco", "node-actionlint", "build", "run-lint.js"));

async function main(files) {
  if (files.length === 0) {
    console.error("usage: node lint.cjs WORKFLOW.yml...");
    return 2;
  }
  let findings = 0;
  for (const file of files) {
    for (const r of await runLint(readFileSync(file, "utf8"), file)) {
      console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings += 1;
    }
  }
  console.error(`actionlint: ${files.length} file(s), ${findings} finding(s)`);
  return findings === 0 ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => { console.error(`actionlint failed to run: ${err}`); process.exit(2); },
);
