#!/usr/bin/env node
// The operator CLI. The TypeScript sources are compiled to dist/ by `npm install` (the prepare script).
import { main } from '../dist/cli/main.js'

process.exitCode = await main(process.argv.slice(2))
