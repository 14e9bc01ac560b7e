// Command webecho is the real node test's server and client, a static binary alone in its
// image:
//
//	webecho serve ADDR   answers every request with "webecho <hostname>" and logs each one
//	webecho get URL      prints the body of URL; fails on an error or a status other than 200
package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		log.Fatal("usage: webecho serve ADDR | webecho get URL")
	}
	switch os.Args[1] {
	case "serve":
		host, _ := os.Hostname()
		http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			log.Printf("served %s %s to %s", r.Method, r.URL.Path, r.RemoteAddr)
			fmt.Fprintf(w, "webecho %s\n", host)
		})
		srv := &http.Server{Addr: os.Args[2], ReadHeaderTimeout: 10 * time.Second}
		log.Fatal(srv.ListenAndServe())
	case "get":
		c := &http.Client{Timeout: 10 * time.Second}
		resp, err := c.Get(os.Args[2])
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			log.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			log.Fatalf("%s: %s: %s", os.Args[2], resp.Status, body)
		}
		os.Stdout.Write(body)
	default:
		log.Fatalf("unknown command %q: webecho serve ADDR | webecho get URL", os.Args[1])
	}
}
