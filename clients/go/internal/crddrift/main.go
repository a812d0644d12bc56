package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: crddrift CRD_DIR GENERATED_DIR")
		os.Exit(2)
	}
	diffs, err := compareDirs(os.Args[1], os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "crddrift:", err)
		os.Exit(2)
	}
	for _, d := range diffs {
		fmt.Println("crddrift:", d)
	}
	if len(diffs) > 0 {
		fmt.Printf("crddrift: %d differences between crd/ and the Go types (clients/go/api)\n", len(diffs))
		os.Exit(1)
	}
	fmt.Println("crddrift: crd/ and the Go types describe the same resources")
}

// compareDirs compares every CRD file of the two folders by name.
func compareDirs(wantDir, gotDir string) ([]string, error) {
	want, err := load(wantDir)
	if err != nil {
		return nil, err
	}
	got, err := load(gotDir)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for n := range want {
		names[n] = true
	}
	for n := range got {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var out []string
	for _, n := range sorted {
		w, inW := want[n]
		g, inG := got[n]
		switch {
		case !inG:
			out = append(out, n+": in crd/, no Go types describe it")
		case !inW:
			out = append(out, n+": the Go types describe it, crd/ has no such file")
		default:
			for _, d := range Compare(w, g) {
				out = append(out, n+": "+d)
			}
		}
	}
	return out, nil
}

// load decodes every *.yaml file of dir, by file name.
func load(dir string) (map[string]map[string]any, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]any{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var doc map[string]any
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if doc["kind"] != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s: not a CustomResourceDefinition", f)
		}
		if _, ok := doc["metadata"].(map[string]any); !ok {
			return nil, fmt.Errorf("%s: no metadata", f)
		}
		out[filepath.Base(f)] = doc
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no CRD files", dir)
	}
	return out, nil
}
