package redial

// SpareCounts returns how many spares c has launching and ready, read
// under c.mu: a test sees a launch the moment it is decided, not when its
// hook is called.
func SpareCounts(c *Conn) (launching, ready int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spares.launching, len(c.spares.ready)
}

// SpareProcesses returns the processes of c's ready spares, oldest first.
func SpareProcesses(c *Conn) []*Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ps []*Process
	for _, s := range c.spares.ready {
		ps = append(ps, s.b.Process)
	}
	return ps
}
