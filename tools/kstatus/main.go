// Command kstatus prints the kstatus verdict (fluxcd/cli-utils, the library Flux's `wait` and
// health checks run) of each object in a JSON array read from stdin, as a JSON array of
// {"status", "message"} in the same order. fivespot's tests use it to prove that Flux reads
// every phase of every fivespot kind as the README says.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kjson "k8s.io/apimachinery/pkg/util/json"
)

type verdict struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

func main() {
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reading stdin:", err)
		os.Exit(2)
	}
	var objects []map[string]interface{}
	// apimachinery's decoder keeps integers int64, as unstructured objects from a client are.
	if err := kjson.Unmarshal(input, &objects); err != nil {
		fmt.Fprintln(os.Stderr, "stdin is not a JSON array of objects:", err)
		os.Exit(2)
	}
	verdicts := make([]verdict, 0, len(objects))
	for i, object := range objects {
		result, err := status.Compute(&unstructured.Unstructured{Object: object})
		if err != nil {
			fmt.Fprintf(os.Stderr, "object %d: %v\n", i, err)
			os.Exit(1)
		}
		verdicts = append(verdicts, verdict{Status: result.Status.String(), Message: result.Message})
	}
	if err := json.NewEncoder(os.Stdout).Encode(verdicts); err != nil {
		fmt.Fprintln(os.Stderr, "writing stdout:", err)
		os.Exit(1)
	}
}
