package redial

// SpareCounts returns how many spares c has launching and ready, read
// under c.mu: a test sees a launch the moment it is decided, not when its
// hook is called.
func SpareCounts(c *Conn) (launching, ready int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spares.launching, len(c.spares.ready)
}

// SparePIDs returns the pids of c's ready spares, oldest first.
func SparePIDs(c *Conn) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var pids []int
	for _, s := range c.spares.ready {
		pids = append(pids, s.b.Process.PID())
	}
	return pids
}
