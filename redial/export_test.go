package redial

// HandleOf returns c's Handle, for tests that act as a policy would.
func HandleOf(c *Conn) Handle { return handle{c} }
