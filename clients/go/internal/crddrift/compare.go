// Command crddrift compares the CustomResourceDefinitions under crd/ with the
// ones controller-gen renders from the Go types and their markers
// (hack/gen-go.sh drift), and fails on any difference.
//
// Usage: crddrift CRD_DIR GENERATED_DIR
//
// Every CRD file in either folder must have its counterpart (a kind without Go
// types, or Go types without a CRD, is a difference). Within a CRD, spec is
// compared whole: group, names, scope, and per version served, storage,
// subresources, printer columns and the schema with every field, type, format,
// enum, pattern, limit, default, required list, list type and CEL rule. The
// comparison is structural (YAML layout and key order do not count) with these
// rules, each because the two sides cannot differ in meaning there:
//
//   - required lists compare as sets (controller-gen sorts them);
//   - an empty object is the same as an absent one (subresources: {});
//   - descriptions compare with runs of white space as one space, since a
//     YAML folded string and a Go comment wrap lines differently;
//   - where crd/ has no description and the Go type has one (a list item's
//     type, such as EnvVar), the Go documentation is extra and not a
//     difference; where crd/ has one, the Go types must say exactly that;
//   - apiVersion and kind come from metav1.TypeMeta, whose documentation is
//     longer than crd/'s first sentence of it: crd/'s must begin it;
//   - with x-kubernetes-int-or-string: true on both sides, the anyOf
//     [{type: integer}, {type: string}] that spells it out may be absent on
//     either (the API server reads the flag as that anyOf; controller-gen
//     writes it only for intstr.IntOrString, not for a type of our own such
//     as v1alpha1.Quantity).
package main

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Compare returns one line per difference between the CRD want (from crd/)
// and got (rendered from the Go types), both decoded from YAML; none when they
// describe the same resource.
func Compare(want, got map[string]any) []string {
	var d differ
	d.walk("metadata.name", want["metadata"].(map[string]any)["name"], got["metadata"].(map[string]any)["name"])
	d.walk("spec", want["spec"], got["spec"])
	return d.out
}

type differ struct{ out []string }

func (d *differ) add(path, format string, args ...any) {
	d.out = append(d.out, path+": "+fmt.Sprintf(format, args...))
}

func (d *differ) walk(path string, want, got any) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			d.add(path, "crd/ has an object, the Go types %s", show(got))
			return
		}
		d.object(path, w, g)
	case []any:
		g, ok := got.([]any)
		if !ok {
			d.add(path, "crd/ has a list, the Go types %s", show(got))
			return
		}
		if strings.HasSuffix(path, ".required") {
			d.set(path, w, g)
			return
		}
		if len(w) != len(g) {
			d.add(path, "crd/ has %d items, the Go types %d (crd/ %s, Go %s)", len(w), len(g), show(w), show(g))
			return
		}
		for i := range w {
			d.walk(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])
		}
	default:
		if !reflect.DeepEqual(want, got) {
			d.add(path, "crd/ %s, the Go types %s", show(want), show(got))
		}
	}
}

func (d *differ) object(path string, want, got map[string]any) {
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		p := path + "." + k
		w, inW := want[k]
		g, inG := got[k]
		if k == "description" {
			d.description(p, w, inW, g, inG)
			continue
		}
		if k == "anyOf" && intOrString(want) && intOrString(got) && (!inW || intOrStringAnyOf(w)) &&
			(!inG || intOrStringAnyOf(g)) {
			continue
		}
		switch {
		case inW && !inG && !empty(w):
			d.add(p, "in crd/ (%s), not in the Go types", show(w))
		case inG && !inW && !empty(g):
			d.add(p, "in the Go types (%s), not in crd/", show(g))
		case inW && inG:
			d.walk(p, w, g)
		}
	}
}

func (d *differ) description(path string, want any, inWant bool, got any, inGot bool) {
	if !inWant {
		return // the Go documentation of a type crd/ leaves undescribed
	}
	ws, _ := want.(string)
	gs, _ := got.(string)
	ws, gs = strings.Join(strings.Fields(ws), " "), strings.Join(strings.Fields(gs), " ")
	switch {
	case !inGot:
		d.add(path, "crd/ documents it (%q), the Go types do not", clip(ws))
	case typeMeta(path):
		if !strings.HasPrefix(gs, ws) {
			d.add(path, "crd/ %q does not begin metav1.TypeMeta's %q", clip(ws), clip(gs))
		}
	case ws != gs:
		d.add(path, "crd/ %q, the Go types %q", clip(ws), clip(gs))
	}
}

// intOrString: a schema with x-kubernetes-int-or-string: true.
func intOrString(schema map[string]any) bool { return schema["x-kubernetes-int-or-string"] == true }

// intOrStringAnyOf: the anyOf [{type: integer}, {type: string}].
func intOrStringAnyOf(v any) bool {
	return reflect.DeepEqual(v, []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}})
}

// typeMeta: the description of the root apiVersion or kind.
func typeMeta(path string) bool {
	return strings.HasSuffix(path, "openAPIV3Schema.properties.apiVersion.description") ||
		strings.HasSuffix(path, "openAPIV3Schema.properties.kind.description")
}

func (d *differ) set(path string, want, got []any) {
	in := func(xs []any) map[string]bool {
		m := map[string]bool{}
		for _, x := range xs {
			m[fmt.Sprint(x)] = true
		}
		return m
	}
	w, g := in(want), in(got)
	for k := range w {
		if !g[k] {
			d.add(path, "%q is required in crd/, not in the Go types", k)
		}
	}
	for k := range g {
		if !w[k] {
			d.add(path, "%q is required in the Go types, not in crd/", k)
		}
	}
}

func empty(v any) bool {
	m, ok := v.(map[string]any)
	return ok && len(m) == 0
}

func show(v any) string {
	switch x := v.(type) {
	case nil:
		return "nothing"
	case string:
		return fmt.Sprintf("%q", clip(x))
	case map[string]any, []any:
		return clip(fmt.Sprintf("%v", x))
	default:
		return fmt.Sprintf("%v (%T)", x, x)
	}
}

func clip(s string) string {
	if len(s) > 160 {
		return s[:157] + "..."
	}
	return s
}
