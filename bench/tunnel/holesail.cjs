// holesail.cjs: runs Holesail's own server and client classes (the ones
// its CLI runs) on a private HyperDHT testnet bound to 127.0.0.1, so the
// comparison in compare.sh never sends a packet off this machine (the
// CLI has no bootstrap option and would use the public DHT).
//
//   node holesail.cjs check                         # loads holesail under node, exits
//   node holesail.cjs testnet                       # prints "bootstrap 127.0.0.1:PORT"
//   node holesail.cjs server PORT BOOTSTRAP_PORT    # prints "url hs://..."
//   node holesail.cjs client URL PORT BOOTSTRAP_PORT  # prints "listening 127.0.0.1:PORT"
//
// HOLESAIL_DIR is the npm prefix holesail was installed into. Each mode
// runs until it is killed.
'use strict'
const path = require('path')
const Module = require('module')

const dir = process.env.HOLESAIL_DIR
if (!dir) {
  console.error('HOLESAIL_DIR is not set')
  process.exit(2)
}
const from = { paths: [path.join(dir, 'node_modules')] }
const [mode, ...args] = process.argv.slice(2)

function onlyLoopback (bootPort) {
  // Every HyperDHT that holesail makes gets the local testnet as its only
  // bootstrap and binds 127.0.0.1.
  const boot = [{ host: '127.0.0.1', port: Number(bootPort) }]
  const patched = new Map()
  const orig = Module.prototype.require
  Module.prototype.require = function (id) {
    const m = orig.apply(this, arguments)
    if (id !== 'hyperdht') return m
    if (!patched.has(m)) {
      class LocalDHT extends m {
        constructor (opts = {}) {
          super({ ...opts, bootstrap: boot, host: '127.0.0.1' })
        }
      }
      patched.set(m, LocalDHT)
    }
    return patched.get(m)
  }
}

async function main () {
  if (mode === 'check') {
    require(require.resolve('holesail', from))
    require(require.resolve('hyperdht/testnet', from))
    console.log('ok')
    process.exit(0)
  }
  if (mode === 'testnet') {
    const createTestnet = require(require.resolve('hyperdht/testnet', from))
    const net = await createTestnet(5, { host: '127.0.0.1' })
    console.log(`bootstrap 127.0.0.1:${net.bootstrap[0].port}`)
    return
  }
  if (mode === 'server') {
    const [port, bootPort] = args
    onlyLoopback(bootPort)
    const Holesail = require(require.resolve('holesail', from))
    const hs = new Holesail({ server: true, port: Number(port), host: '127.0.0.1', secure: false })
    await hs.ready()
    console.log(`url ${hs.info.url}`)
    return
  }
  if (mode === 'client') {
    const [url, port, bootPort] = args
    onlyLoopback(bootPort)
    const Holesail = require(require.resolve('holesail', from))
    const hs = new Holesail({ client: true, key: url, port: Number(port), host: '127.0.0.1' })
    await hs.ready()
    console.log(`listening 127.0.0.1:${port}`)
    return
  }
  console.error('usage: holesail.cjs testnet | server PORT BOOT | client URL PORT BOOT')
  process.exit(2)
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
