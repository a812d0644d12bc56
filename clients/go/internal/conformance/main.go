// Command conformance runs the conformance table (clients/conformance.yaml)
// with the Go helper (sandbox.dev/client-go/sandbox): the client steps
// (create, suspend, resume, wait, delete) through the helper, the harness steps
// (precreate, check, quota) through the suite's shared harness command, so every
// driver is judged by the same checks (e2e/test_conformance.sh).
//
// Usage: conformance TABLE NAMESPACE HARNESS...
//
// HARNESS... is the command that runs a harness step, given "precreate",
// "check" or "quota" and the step as JSON (e2e/conformance.py harness TABLE NAMESPACE).
// The kubeconfig of identity <as> is $CONFORMANCE_KUBECONFIG_<as> ("-" as
// "_"). Prints "PASS go case" / "FAIL go case: why" and "go: N passed, N
// failed"; exits 1 when a case failed.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"sandbox.dev/client-go/clientset/versioned"
	"sandbox.dev/client-go/sandbox"
)

type table struct {
	Errors   map[string]struct{ Go string } `json:"errors"`
	Defaults struct {
		Image   string   `json:"image"`
		Command []string `json:"command"`
	} `json:"defaults"`
	Cases []struct {
		Name  string           `json:"name"`
		Steps []map[string]any `json:"steps"`
	} `json:"cases"`
}

// step is a client step's body.
type step struct {
	As                   string   `json:"as"`
	Name                 string   `json:"name"`
	Key                  string   `json:"key"`
	Owner                string   `json:"owner"`
	Image                string   `json:"image"`
	Command              []string `json:"command"`
	RuntimeClassName     string   `json:"runtimeClassName"`
	ShutdownAfterSeconds int      `json:"shutdownAfterSeconds"`
	Wait                 *bool    `json:"wait"`
	Repeat               int      `json:"repeat"`
	For                  string   `json:"for"`
	Keep                 string   `json:"keep"`
	UID                  string   `json:"uid"`
	Deleted              *bool    `json:"deleted"`
	Times                int      `json:"times"`
}

// outcome is what a client step ended with: the uid of the Sandbox (create)
// and whether a delete deleted it.
type outcome struct {
	uid     types.UID
	deleted bool
}

// kinds names the helper's errors as the table does.
var kinds = map[string]error{
	"ErrKeyConflict": sandbox.ErrKeyConflict, "ErrIntentMismatch": sandbox.ErrIntentMismatch,
	"ErrOwnerNotAuthorized": sandbox.ErrOwnerNotAuthorized, "ErrExpired": sandbox.ErrExpired,
	"ErrRejected": sandbox.ErrRejected, "ErrSuspended": sandbox.ErrSuspended, "ErrForeignPod": sandbox.ErrForeignPod,
	"ErrQuota": sandbox.ErrQuota, "ErrFailed": sandbox.ErrFailed,
}

type runner struct {
	t         table
	namespace string
	harness   []string
	clients   map[string]*sandbox.Client
}

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: conformance TABLE NAMESPACE HARNESS...")
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	r := &runner{namespace: os.Args[2], harness: os.Args[3:], clients: map[string]*sandbox.Client{}}
	if err := yaml.Unmarshal(data, &r.t); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	passed, failed := 0, 0
	for _, c := range r.t.Cases {
		start := time.Now()
		if err := r.runCase(c.Steps); err != nil {
			failed++
			fmt.Printf("FAIL go %s: %v\n", c.Name, err)
		} else {
			passed++
			fmt.Printf("PASS go %s (%.1fs)\n", c.Name, time.Since(start).Seconds())
		}
	}
	fmt.Printf("go: %d passed, %d failed\n", passed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

func (r *runner) client(identity string) (*sandbox.Client, error) {
	if c, ok := r.clients[identity]; ok {
		return c, nil
	}
	kc := os.Getenv("CONFORMANCE_KUBECONFIG_" + strings.ReplaceAll(identity, "-", "_"))
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		return nil, err
	}
	cs, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	c := sandbox.New(cs, r.namespace)
	r.clients[identity] = c
	return c, nil
}

func (r *runner) runCase(steps []map[string]any) error {
	precreated := map[string]string{}
	kept := map[string]types.UID{} // the uids creates kept, by label
	for i, raw := range steps {
		expect := "ok"
		if e, ok := raw["expect"].(string); ok {
			expect = e
		}
		var kind string
		var body map[string]any
		for k, v := range raw {
			if k != "expect" {
				kind, body = k, v.(map[string]any)
			}
		}
		where := fmt.Sprintf("step %d (%s %v)", i+1, kind, body["name"])
		if kind == "precreate" || kind == "check" || kind == "quota" {
			js, _ := json.Marshal(body)
			cmd := exec.Command(r.harness[0], append(r.harness[1:], kind, string(js))...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				return fmt.Errorf("%s: %s", where, strings.TrimSpace(stderr.String()))
			}
			if kind == "precreate" {
				precreated[body["name"].(string)] = strings.TrimSpace(string(out))
			}
			continue
		}
		js, _ := json.Marshal(body)
		var s step
		if err := json.Unmarshal(js, &s); err != nil {
			return fmt.Errorf("%s: %v", where, err)
		}
		runs := []step{s}
		if s.Repeat > 0 {
			runs = nil
			for n := 0; n < s.Repeat; n++ {
				one := s
				one.Name, one.Key = fmt.Sprintf("%s-%d", s.Name, n), fmt.Sprintf("%s-%d", s.Key, n)
				runs = append(runs, one)
			}
		}
		for n := 1; n < s.Times; n++ {
			runs = append(runs, s)
		}
		for _, one := range runs {
			res, err := r.do(kind, one, kept)
			if expect == "ok" {
				if err != nil {
					return fmt.Errorf("%s: %v", where, err)
				}
				if want, ok := precreated[one.Name]; ok && kind == "create" && string(res.uid) != want {
					return fmt.Errorf("%s: returned uid %s, the stored object's is %s", where, res.uid, want)
				}
				if kind == "create" && one.Keep != "" {
					kept[one.Keep] = res.uid
				}
				if kind == "delete" && one.Deleted != nil && res.deleted != *one.Deleted {
					return fmt.Errorf("%s: deleted %v, want %v", where, res.deleted, *one.Deleted)
				}
				continue
			}
			want, ok := kinds[r.t.Errors[expect].Go]
			var typed *sandbox.Error
			switch {
			case !ok:
				return fmt.Errorf("%s: the table names no Go error for %q", where, expect)
			case err == nil:
				return fmt.Errorf("%s: succeeded, want %s", where, expect)
			case !errors.Is(err, want) || !errors.As(err, &typed):
				return fmt.Errorf("%s: %v, want %s", where, err, expect)
			case typed.Message == "":
				return fmt.Errorf("%s: %s without the server's message", where, expect)
			}
		}
	}
	return nil
}

// do runs one client step (a delete with the uid a create kept under its
// label).
func (r *runner) do(kind string, s step, kept map[string]types.UID) (outcome, error) {
	c, err := r.client(s.As)
	if err != nil {
		return outcome{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	wait := s.Wait == nil || *s.Wait
	switch kind {
	case "create":
		req := sandbox.Request{Name: s.Name, Key: s.Key, Owner: s.Owner, Image: s.Image, Command: s.Command,
			RuntimeClassName: s.RuntimeClassName, ShutdownAfter: time.Duration(s.ShutdownAfterSeconds) * time.Second}
		if req.Image == "" {
			req.Image = r.t.Defaults.Image
		}
		if req.Command == nil {
			req.Command = r.t.Defaults.Command
		}
		sb, err := c.Create(ctx, req)
		if err != nil {
			return outcome{}, err
		}
		if wait {
			_, err = c.WaitReadyUID(ctx, s.Name, sb.UID)
		}
		return outcome{uid: sb.UID}, err
	case "suspend":
		sb, err := c.Suspend(ctx, s.Name)
		if err != nil || !wait {
			return outcome{}, err
		}
		_, err = c.WaitSuspendedUID(ctx, s.Name, sb.UID)
		return outcome{}, err
	case "resume":
		_, err = c.Resume(ctx, s.Name)
		return outcome{}, err
	case "wait":
		if s.For == "suspended" {
			_, err = c.WaitSuspended(ctx, s.Name)
		} else {
			_, err = c.WaitReady(ctx, s.Name)
		}
		return outcome{}, err
	case "delete":
		uid, ok := kept[s.UID]
		if !ok {
			return outcome{}, fmt.Errorf("no Sandbox kept as %q", s.UID)
		}
		deleted, err := c.DeleteUID(ctx, s.Name, uid)
		return outcome{deleted: deleted}, err
	}
	return outcome{}, fmt.Errorf("unknown step %q", kind)
}
