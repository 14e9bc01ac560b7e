package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/interlink-hq/shadowgate/validate"
	"github.com/interlink-hq/shadowgate/validate/policy"
)

// readFile reads a path, or standard input for "-".
func readFile(path string, stdin io.Reader) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(path)
}

// loadPolicy reads --policy: the document itself or a ConfigMap manifest holding it.
func loadPolicy(path string, stdin io.Reader, rules validate.CredentialRules) (*policy.Policy, error) {
	data, err := readFile(path, stdin)
	if err != nil {
		return nil, usageError("cannot read the policy: %v", err)
	}
	pol, errs := validate.ParsePolicy(data, rules)
	if len(errs) > 0 {
		return nil, usageError("invalid policy %s, or one a shadowgate run with these flags may not carry out:\n%s", path, errs.ToAggregate())
	}
	return pol, nil
}

// inputObject is one object read from -f, typed when the scheme knows its kind.
type inputObject struct {
	obj  runtime.Object // nil for kinds the scheme does not know
	kind string
	ns   string
	name string
}

// readObjects reads every document of every -f argument, flattening v1 Lists, and gives
// objects without a namespace the default one.
func readObjects(paths []string, namespace string, stdin io.Reader) ([]inputObject, error) {
	var objs []inputObject
	for _, path := range paths {
		data, err := readFile(path, stdin)
		if err != nil {
			return nil, usageError("cannot read %s: %v", path, err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for i := 0; ; i++ {
			var raw json.RawMessage
			if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, usageError("%s: document %d is not valid YAML or JSON: %v", path, i+1, err)
			}
			if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
				continue
			}
			more, err := decodeObject(raw, namespace)
			if err != nil {
				return nil, usageError("%s: document %d: %v", path, i+1, err)
			}
			objs = append(objs, more...)
		}
	}
	return objs, nil
}

func decodeObject(raw []byte, namespace string) ([]inputObject, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name, GenerateName, Namespace string
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("not a Kubernetes object: %w", err)
	}
	if head.Kind == "" || head.APIVersion == "" {
		return nil, fmt.Errorf("not a Kubernetes object: apiVersion and kind are required")
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil)
	if runtime.IsNotRegisteredError(err) {
		name := head.Metadata.Name
		if name == "" {
			name = head.Metadata.GenerateName
		}
		return []inputObject{{kind: head.Kind, ns: head.Metadata.Namespace, name: name}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", head.Kind, err)
	}
	if list, ok := obj.(*corev1.List); ok {
		var objs []inputObject
		for _, item := range list.Items {
			more, err := decodeObject(item.Raw, namespace)
			if err != nil {
				return nil, err
			}
			objs = append(objs, more...)
		}
		return objs, nil
	}
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if accessor.GetNamespace() == "" {
		accessor.SetNamespace(namespace)
	}
	name := accessor.GetName()
	if name == "" {
		name = accessor.GetGenerateName()
	}
	return []inputObject{{obj: obj, kind: head.Kind, ns: accessor.GetNamespace(), name: name}}, nil
}
