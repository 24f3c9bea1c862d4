//go:build !unix

package redial

// ledgersSupported: plugins keep ledgers on Unix only (package ledger), so
// a Conn elsewhere gives its launches none, and its calls fail as without
// the ledger.
const ledgersSupported = false
