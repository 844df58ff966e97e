// Command etcd is etcd's server, as the etcd repository's own main package runs it: that package
// is in a module the module proxy serves without the server, so test/env/kube/build.sh builds
// this one, which makes the same call.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
