// faultproxy is a TCP proxy for tests that lose responses. Every request
// reaches the upstream (the kube-apiserver) whole; with probability -drop a
// client write (after the TLS handshake) arms the connection, and the next
// chunk the upstream sends back is swallowed and the connection reset: the
// server has acted, the client never hears of it. TLS passes through
// untouched (the proxy never decrypts), so "a write" stands for "a request".
package main

import (
	"flag"
	"fmt"
	"log"
	"math/rand"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

var (
	listen   = flag.String("listen", "127.0.0.1:0", "address to listen on")
	upstream = flag.String("upstream", "", "host:port to forward to")
	drop     = flag.Float64("drop", 0.2, "share of client requests whose response is lost (connection reset)")
	delay    = flag.Duration("delay", 0, "delay before cutting (the server has surely processed the request)")
	seed     = flag.Int64("seed", 1, "random seed")
	portFile = flag.String("port-file", "", "write the bound port here")
	quiet    = flag.Bool("quiet", false, "do not log each cut")
)

var conns, cuts atomic.Int64

func main() {
	flag.Parse()
	if *upstream == "" {
		log.Fatal("-upstream is required")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if *portFile != "" {
		if err := os.WriteFile(*portFile, []byte(fmt.Sprintf("%d\n", port)), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("faultproxy listening on %s -> %s, drop=%.2f", ln.Addr(), *upstream, *drop)
	var mu sync.Mutex
	rng := rand.New(rand.NewSource(*seed))
	roll := func() bool { mu.Lock(); defer mu.Unlock(); return rng.Float64() < *drop }
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		log.Printf("faultproxy: %d connections, %d cut", conns.Load(), cuts.Load())
		os.Exit(0)
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		conns.Add(1)
		go serve(c, roll)
	}
}

func serve(client net.Conn, roll func() bool) {
	defer client.Close()
	up, err := net.DialTimeout("tcp", *upstream, 5*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	var armed atomic.Bool
	go func() {
		buf := make([]byte, 32*1024)
		writes := 0
		for {
			n, err := client.Read(buf)
			if n > 0 {
				writes++
				// The first write is the ClientHello; later ones carry requests.
				if writes > 1 && !armed.Load() && roll() {
					armed.Store(true)
				}
				if _, werr := up.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		up.Close()
	}()
	buf := make([]byte, 32*1024)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			if armed.Load() {
				if *delay > 0 {
					time.Sleep(*delay)
				}
				cuts.Add(1)
				if !*quiet {
					log.Printf("cut connection %s after the server answered", client.RemoteAddr())
				}
				if tc, ok := client.(*net.TCPConn); ok {
					tc.SetLinger(0) // RST, not FIN
				}
				return
			}
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
