package ledger

// ForgetOpened makes ServerOption forget the ledger this test process
// opened last, as a process that opened none.
func ForgetOpened() {
	opened.Lock()
	opened.last = nil
	opened.Unlock()
}

// The ledger lives as long as its plugin's process; tests, which open many,
// close them.

func (l *ledger) close() error {
	l.idx.close()
	return l.f.Close()
}

func (x *index) close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, lf := range x.files {
		lf.close()
	}
	x.files = nil
}

// appendRecord appends the frame of r; the format's definition, which
// the plugin's encoders (appendStarted, appendCompleted) follow.
func appendRecord(b []byte, r record) []byte {
	if r.kind == kindStarted {
		return appendStarted(b, r.id, r.method)
	}
	start := len(b)
	b = beginFrame(b)
	b = appendCompletedHead(b, r.id, r.method, r.kept, r.status)
	if r.kept {
		b = appendString(b, r.respType)
		b = append(b, r.resp...)
	}
	return finishFrame(b, start)
}
