package export

// EachField calls fn with each top-level key of a JSON object and its value
// as cell text, in the order of the text, until fn returns false. An empty
// text or null has no fields. It is the grid's fast path (no reflection,
// no allocations beyond the strings handed out).
func EachField(obj []byte, fn func(key, value string) bool) error {
	iter, ok, err := newObjectIter(string(obj))
	if err != nil || !ok {
		return err
	}
	for {
		k, value, more, err := iter.next()
		if err != nil || !more {
			return err
		}
		v, err := value.cellText()
		if err != nil {
			return err
		}
		if !fn(k, v) {
			return nil
		}
	}
}
