// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 at the
// version pinned in this module. It is what etcd's own main package runs.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
