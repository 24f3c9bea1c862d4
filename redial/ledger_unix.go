//go:build unix

package redial

// ledgersSupported: plugins keep ledgers on Unix only (package ledger).
const ledgersSupported = true
