package health

// ErrHung is the cause of a hung plugin's respawn, for tests.
var ErrHung = errHung

// Check is the outcome of one health check.
type Check = check

// Observed returns cfg with onCheck set to f.
func Observed(cfg Config, f func(Check)) Config { cfg.onCheck = f; return cfg }
