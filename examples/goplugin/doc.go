// Package goplugin shows a hashicorp/go-plugin host that survives the
// SIGKILL of its plugin with one respawn hook and one call policy; see the
// package's Example.
package goplugin
