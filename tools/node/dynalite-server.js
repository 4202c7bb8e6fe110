#!/usr/bin/env node
// dynalite's own command line (same flags), less one crash.
//
// dynalite 4.0.0 rethrows a request's 'error' event (index.js: `req.on('error', function (err) { throw err })`),
// so a client that goes away in the middle of a request -- a migration killed with SIGKILL while a Scan is
// in flight -- takes the whole server down with "Error: aborted" (ECONNRESET), and every later test or run
// against it fails with "connection refused" (upstream: architect/dynalite issue 183, open). That error
// concerns one dead connection only: it is logged and the server goes on. Any other uncaught error still
// ends the process, as Node would end it.
'use strict'

process.on('uncaughtException', function (err) {
  if (err && err.code === 'ECONNRESET' && err.message === 'aborted') {
    console.error('[ddb2bt] a client closed its connection mid-request; dynalite goes on')
    return
  }
  console.error(err && err.stack ? err.stack : err)
  process.exit(1)
})

require('dynalite/cli.js')
