package main

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const base = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.sandbox.dev}
spec:
  group: sandbox.dev
  names: {kind: Thing, plural: things}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    additionalPrinterColumns: [{name: Phase, type: string, jsonPath: .status.phase}]
    schema:
      openAPIV3Schema:
        type: object
        properties:
          apiVersion: {type: string, description: APIVersion defines the versioned schema.}
          spec:
            type: object
            description: >-
              The requested
              thing.
            required: [image, size]
            properties:
              image: {type: string, maxLength: 1024, pattern: '^[^\x00]*$', description: The image.}
              size: {type: integer, format: int32, minimum: 0, maximum: 10}
              policy: {type: string, enum: [Retain, Delete]}
              quantities:
                type: object
                additionalProperties: {anyOf: [{type: integer}, {type: string}], x-kubernetes-int-or-string: true}
              env:
                type: array
                maxItems: 4
                items: {type: object, properties: {name: {type: string}}}
`

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Every kind of difference the drift test exists for is found, and named.
func TestCompareFindsEveryDifference(t *testing.T) {
	cases := []struct{ name, from, to, want string }{
		{"type", "size: {type: integer, format: int32", "size: {type: string, format: int32", "properties.size.type: crd/ \"integer\", the Go types \"string\""},
		{"format", "format: int32", "format: int64", "properties.size.format"},
		{"enum value", "enum: [Retain, Delete]", "enum: [Retain, Remove]", "properties.policy.enum[1]"},
		{"enum length", "enum: [Retain, Delete]", "enum: [Retain]", "properties.policy.enum: crd/ has 2 items, the Go types 1"},
		{"maxLength", "maxLength: 1024", "maxLength: 1000", "properties.image.maxLength"},
		{"maximum", "maximum: 10", "maximum: 11", "properties.size.maximum"},
		{"maxItems", "maxItems: 4", "maxItems: 5", "properties.env.maxItems"},
		{"pattern", `pattern: '^[^\x00]*$'`, `pattern: '^.*$'`, "properties.image.pattern"},
		{"limit missing", "maxItems: 4\n", "\n", "properties.env.maxItems: in crd/ (4 (float64)), not in the Go types"},
		{"required missing", "required: [image, size]", "required: [image]", `"size" is required in crd/, not in the Go types`},
		{"required extra", "required: [image, size]", "required: [image, size, policy]", `"policy" is required in the Go types, not in crd/`},
		{"field missing", "              policy: {type: string, enum: [Retain, Delete]}\n", "", "properties.policy: in crd/"},
		{"field extra", "              env:\n", "              extra: {type: string}\n              env:\n", "properties.extra: in the Go types"},
		{"description", "description: The image.", "description: An image.", `properties.image.description: crd/ "The image.", the Go types "An image."`},
		{"description missing", "description: The image.}", "}", `properties.image.description: crd/ documents it`},
		{"printer column", "jsonPath: .status.phase", "jsonPath: .status.state", "additionalPrinterColumns[0].jsonPath"},
		{"scope", "scope: Namespaced", "scope: Cluster", "spec.scope"},
		{"type meta", "description: APIVersion defines the versioned schema.", "description: Something else.", "does not begin metav1.TypeMeta's"},
		{"int or string", "{anyOf: [{type: integer}, {type: string}], x-kubernetes-int-or-string: true}", "{type: string}", "properties.quantities.additionalProperties.anyOf: in crd/"},
		{"int or string flag", "{anyOf: [{type: integer}, {type: string}], x-kubernetes-int-or-string: true}", "{anyOf: [{type: integer}, {type: string}]}", "additionalProperties.x-kubernetes-int-or-string: in crd/"},
		{"int or string anyOf", "{anyOf: [{type: integer}, {type: string}], x-kubernetes-int-or-string: true}", "{anyOf: [{type: integer}, {type: number}], x-kubernetes-int-or-string: true}", "additionalProperties.anyOf[1].type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(base, c.from) {
				t.Fatalf("the case's text %q is not in the base CRD", c.from)
			}
			diffs := Compare(decode(t, base), decode(t, strings.Replace(base, c.from, c.to, 1)))
			if len(diffs) == 0 {
				t.Fatalf("no difference found")
			}
			if !strings.Contains(strings.Join(diffs, "\n"), c.want) {
				t.Fatalf("differences %q do not name %q", diffs, c.want)
			}
		})
	}
}

// What cannot differ in meaning is not a difference.
func TestCompareIgnoresLayout(t *testing.T) {
	same := strings.NewReplacer(
		"required: [image, size]", "required: [size, image]", // a set
		"description: >-\n              The requested\n              thing.", "description: \"The requested\\nthing.\"",
		"items: {type: object, properties: {name: {type: string}}}", "items: {type: object, description: Go doc of the item type., properties: {name: {type: string}}}",
		"APIVersion defines the versioned schema.", "APIVersion defines the versioned schema. Servers should convert.",
		"  scope: Namespaced", "  scope: Namespaced\n  extra: {}",
		// the int-or-string flag alone (a type of our own, as controller-gen writes it)
		"{anyOf: [{type: integer}, {type: string}], x-kubernetes-int-or-string: true}", "{x-kubernetes-int-or-string: true}",
	).Replace(base)
	if same == base {
		t.Fatal("the replacements changed nothing")
	}
	if diffs := Compare(decode(t, base), decode(t, same)); len(diffs) != 0 {
		t.Fatalf("differences where there are none: %q", diffs)
	}
}
