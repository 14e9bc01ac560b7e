// Command etcd is the etcd server for the e2e control plane: the etcd server module has no main
// package of its own, so this one calls the same entry point the release binary does.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
