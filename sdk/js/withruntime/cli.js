#!/usr/bin/env node
// `npx withruntime sandbox run -- CMD`: the kiln-js CLI.
import "../dist/cli.js";
