// Command pageserver is the local site's in-cluster server (the reverse tunnel's "minio"), a
// static binary alone in its image on the real node: it answers every GET with one page.
//
//	pageserver -listen ADDR -page TEXT
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"time"
)

func main() {
	listen := flag.String("listen", ":9000", "address to listen on")
	page := flag.String("page", "", "the page every request gets, a line")
	flag.Parse()
	if *page == "" {
		log.Fatal("pageserver: -page is required")
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		log.Printf("served %s %s to %s", r.Method, r.URL.Path, r.RemoteAddr)
		fmt.Fprintln(w, *page)
	})
	srv := &http.Server{Addr: *listen, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
