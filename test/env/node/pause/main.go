// Command pause is the sandbox ("pause") container of the test cluster's real node: it holds a
// pod's namespaces and does nothing else until it is told to stop. No registry can be reached
// from the test machines, so test/env/node/images.sh builds it into an image here.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
