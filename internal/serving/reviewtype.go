package serving

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// reviewType reads the apiVersion and kind at the top level of a JSON object as
// kjson.UnmarshalCaseSensitivePreserveInts into a metav1.TypeMeta does, and as
// controller-runtime's decoder then does: keys matched exactly after unescaping, the last of
// duplicates winning, a null value leaving the field empty. It skips every other value without
// decoding it: a fraction of the cost of a full parse, which on a large pod costs more than
// the rest of the request (BenchmarkValidatePodsOverHTTP). ok is false for a body it cannot
// read as such an object, which admission.Webhook then refuses itself; trailing bytes after
// the object are left for it too.
func reviewType(body []byte) (apiVersion, kind string, ok bool) {
	i := skipSpace(body, 0)
	if bytes.Equal(bytes.TrimSpace(body[i:]), []byte("null")) {
		return "", "", true // a parse leaves both empty
	}
	if i >= len(body) || body[i] != '{' {
		return "", "", false
	}
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return "", "", true
	}
	for {
		keyEnd, ok := skipString(body, i)
		if !ok {
			return "", "", false
		}
		key := body[i:keyEnd]
		i = skipSpace(body, keyEnd)
		if i >= len(body) || body[i] != ':' {
			return "", "", false
		}
		i = skipSpace(body, i+1)
		valueEnd, ok := skipValue(body, i)
		if !ok {
			return "", "", false
		}
		if name, _ := unquote(key); name == "apiVersion" || name == "kind" {
			value := body[i:valueEnd]
			s, isString := unquote(value)
			if !isString && !bytes.Equal(value, []byte("null")) {
				return "", "", false // TypeMeta cannot hold it: not a review
			}
			if isString && name == "apiVersion" {
				apiVersion = s
			} else if isString {
				kind = s
			}
		}
		i = skipSpace(body, valueEnd)
		switch {
		case i < len(body) && body[i] == ',':
			i = skipSpace(body, i+1)
		case i < len(body) && body[i] == '}':
			return apiVersion, kind, true
		default:
			return "", "", false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the end of the string starting at b[i], past its closing quote.
func skipString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++ // the escaped character
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

// skipValue returns the end of the value starting at b[i]: a string, an object or array with
// everything in it, or a literal or number up to the next delimiter. It finds the end; it does
// not check the value is valid JSON.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, ok := skipString(b, i)
				if !ok {
					return 0, false
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return 0, false
	}
	start := i
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i, i > start
}

// unquote is the string a JSON string literal holds, false when raw is not one.
func unquote(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	if inner := raw[1 : len(raw)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	// Escapes, or bytes that are not UTF-8, which a parse replaces with U+FFFD.
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}
