package health

// ErrHung is the cause of a hung plugin's respawn, for tests.
var ErrHung = errHung
