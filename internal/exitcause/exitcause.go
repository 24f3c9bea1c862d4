// Package exitcause gives packages of this module that watch a plugin from
// outside redial (health) the cause redial gives the exit of its process,
// so that a plugin found dead is replaced with the same cause whoever
// sees the death first.
package exitcause

// Of returns the cause redial gives the exit of p, a *redial.Process: an
// error naming the exit and the end of the plugin's stderr, which unwraps
// to the process's *exec.ExitError; nil while p runs. Package redial,
// which this package cannot import, sets it.
var Of func(p any) error
