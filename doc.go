// Package respawn is the one-line way to a gRPC connection to a plugin
// process that survives the plugin's death: [New] composes package redial
// (the connection, and the hook that starts plugins), package interceptor
// (the call policy that classifies failed calls and retries what is safe
// to retry) and package health (early warning of a dead or hung plugin: with
// its defaults a stopped plugin is replaced within 3s on Linux; see
// [WithHealth] and health.Config.Off).
//
//	conn, err := respawn.New(&command.Hook{Path: pluginPath},
//		respawn.WithConn(redial.WithName("objectstore")))
//	if err != nil {
//		return err
//	}
//	defer conn.Close()
//	store := pb.NewObjectStoreClient(conn) // bind once; survives every respawn
//
// Built by hand, a redial.Conn without redial.WithPolicy never retries a
// failed call: New always installs the policy.
package respawn
