package ledger

// ForgetOpened makes ServerOption forget the ledger this test process
// opened last, as a process that opened none.
func ForgetOpened() {
	opened.Lock()
	opened.last = nil
	opened.Unlock()
}
