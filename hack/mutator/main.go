// mutator is a MutatingAdmissionWebhook for tests: the kind of change a
// cluster's own admission chain makes to the controller's pods. For every pod
// it is sent (the webhook configuration selects the controller's pods by
// label) it injects a sidecar container and pins each container image that
// has no digest to "<image>@sha256:<digest>" (the digest is the SHA-256 of
// the image string: the point is the rewrite, not a registry lookup). The
// sidecar follows the restricted Pod Security profile, so a namespace that
// enforces it still admits the pod.
//
// It serves HTTPS with a self-signed certificate for 127.0.0.1 and localhost
// that it writes to -cert-dir/tls.crt (the caBundle of the webhook
// configuration). Standard library only.
//
// It also serves /allow-all: every review allowed, no patch, nothing else
// done. hack/bench-admission.sh --empty-webhook points webhook
// configurations shaped like the product's there, to measure what any
// webhook costs the API server on the machine at hand.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

var (
	listen       = flag.String("listen", "127.0.0.1:0", "address to listen on")
	certDir      = flag.String("cert-dir", "", "directory for tls.crt/tls.key (required)")
	portFile     = flag.String("port-file", "", "write the bound port here")
	sidecarName  = flag.String("sidecar-name", "sbx-sidecar", "name of the injected container")
	sidecarImage = flag.String("sidecar-image", "registry.local/sidecar:1", "image of the injected container")
	pin          = flag.Bool("pin-digests", true, "pin container images to a digest")
)

var mutated, allowed atomic.Int64

// Only the parts of AdmissionReview v1 this webhook reads or writes.
type review struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Request    *request  `json:"request,omitempty"`
	Response   *response `json:"response,omitempty"`
}

type request struct {
	UID       string          `json:"uid"`
	Operation string          `json:"operation"`
	Object    json.RawMessage `json:"object"`
}

type response struct {
	UID       string `json:"uid"`
	Allowed   bool   `json:"allowed"`
	PatchType string `json:"patchType,omitempty"`
	Patch     []byte `json:"patch,omitempty"` // base64 in JSON, as the API wants
}

type pod struct {
	Spec struct {
		Containers []struct {
			Name  string `json:"name"`
			Image string `json:"image"`
		} `json:"containers"`
	} `json:"spec"`
}

type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// digestOf returns a stable fake digest for image.
func digestOf(image string) string {
	sum := sha256.Sum256([]byte(image))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// patchFor returns the JSON patch for one pod.
func patchFor(p *pod) []patchOp {
	var ops []patchOp
	if *pin {
		for i, c := range p.Spec.Containers {
			if c.Image != "" && !strings.Contains(c.Image, "@") {
				ops = append(ops, patchOp{"replace", fmt.Sprintf("/spec/containers/%d/image", i),
					c.Image + "@" + digestOf(c.Image)})
			}
		}
	}
	for _, c := range p.Spec.Containers {
		if c.Name == *sidecarName {
			return ops // re-invocation: inject once
		}
	}
	sidecar := map[string]any{
		"name":  *sidecarName,
		"image": *sidecarImage,
		"args":  []string{"serve"},
		"securityContext": map[string]any{
			"allowPrivilegeEscalation": false,
			"runAsNonRoot":             true,
			"capabilities":             map[string]any{"drop": []string{"ALL"}},
			"seccompProfile":           map[string]any{"type": "RuntimeDefault"},
		},
		"resources": map[string]any{
			"limits": map[string]string{"cpu": "100m", "memory": "64Mi"},
		},
	}
	return append(ops, patchOp{"add", "/spec/containers/-", sidecar})
}

// readReview reads an AdmissionReview request (at most 4 MiB) and returns
// it with an allowed answer to fill in, or answers 400 itself and returns
// nil.
func readReview(w http.ResponseWriter, r *http.Request) (*review, *review) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		http.Error(w, "read: "+err.Error(), http.StatusBadRequest)
		return nil, nil
	}
	var in review
	if err := json.Unmarshal(body, &in); err != nil || in.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return nil, nil
	}
	return &in, &review{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview",
		Response: &response{UID: in.Request.UID, Allowed: true}}
}

// writeReview sends the answer.
func writeReview(w http.ResponseWriter, out *review) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(out); err != nil {
		log.Printf("write: %v", err)
	}
}

func mutate(w http.ResponseWriter, r *http.Request) {
	in, out := readReview(w, r)
	if in == nil {
		return
	}
	var p pod
	if in.Request.Operation == "CREATE" && json.Unmarshal(in.Request.Object, &p) == nil {
		if ops := patchFor(&p); len(ops) > 0 {
			patch, err := json.Marshal(ops)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			out.Response.PatchType = "JSONPatch"
			out.Response.Patch = patch
			mutated.Add(1)
		}
	}
	writeReview(w, out)
}

// allowAll answers every AdmissionReview allowed, without a patch.
func allowAll(w http.ResponseWriter, r *http.Request) {
	if in, out := readReview(w, r); in != nil {
		allowed.Add(1)
		writeReview(w, out)
	}
}

// selfSigned writes a self-signed serving certificate for 127.0.0.1 and
// localhost to dir and returns it.
func selfSigned(dir string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "sandbox-mutator"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o644); err != nil {
		return tls.Certificate{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

func main() {
	flag.Parse()
	if *certDir == "" {
		log.Fatal("-cert-dir is required")
	}
	cert, err := selfSigned(*certDir)
	if err != nil {
		log.Fatalf("certificate: %v", err)
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
	mux := http.NewServeMux()
	mux.HandleFunc("/mutate", mutate)
	mux.HandleFunc("/allow-all", allowAll)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "ok %d %d\n", mutated.Load(), allowed.Load())
	})
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}
	log.Printf("mutator listening on 127.0.0.1:%d", port)
	log.Fatal(srv.ServeTLS(ln, "", ""))
}
