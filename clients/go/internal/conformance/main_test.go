package main

import (
	"os"
	"testing"

	"sigs.k8s.io/yaml"
)

// Every error kind of the table is one of the helper's errors, so that a
// case expecting it can be judged.
func TestTableNamesTheHelpersErrors(t *testing.T) {
	data, err := os.ReadFile("../../../conformance.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tb table
	if err := yaml.Unmarshal(data, &tb); err != nil {
		t.Fatal(err)
	}
	if len(tb.Errors) == 0 {
		t.Fatal("the table names no error kinds")
	}
	for kind, names := range tb.Errors {
		if _, ok := kinds[names.Go]; !ok {
			t.Errorf("%s: the table names %q, not an error of the helper", kind, names.Go)
		}
	}
}
