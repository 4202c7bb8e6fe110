// Fallback Bigtable emulator for machines without cbtemulator: serves Google's
// in-memory bttest server (the same code cbtemulator wraps). Built by tools/setup.sh
// from Debian's golang-google-cloud-dev, so no download beyond apt is needed.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"strconv"

	"cloud.google.com/go/bigtable/bttest"
)

func main() {
	host := flag.String("host", "localhost", "address to bind to")
	port := flag.Int("port", 9000, "port to bind to")
	flag.Parse()
	srv, err := bttest.NewServer(net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		log.Fatalf("bttest: %v", err)
	}
	fmt.Printf("Cloud Bigtable emulator running on %s\n", srv.Addr)
	select {}
}
