package engine

import (
	"errors"
	"fmt"
)

// Error codes carried by user-facing errors. The HTTP layer maps each to one
// status; the CLI maps EINVALID to exit code 2 where the input was a flag.
const (
	ECONFLICT     = "conflict"
	EINTERNAL     = "internal"
	EINVALID      = "invalid"
	ENOTFOUND     = "not_found"
	EUNAUTHORIZED = "unauthorized"
	EFORBIDDEN    = "forbidden"
	ETOOLARGE     = "too_large"
	ETOOMANY      = "too_many_requests"
	EUNSUPPORTED  = "unsupported_media_type"
)

// Error is an error meant to be shown to people: a code and a message that
// says exactly what is wrong.
type Error struct {
	Code    string
	Message string
	// Field names the input field an EINVALID error is about, as a path
	// ("stages[0].config.url"), or is empty. The message starts with it.
	Field string
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with the given code.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldErrorf returns an EINVALID *Error about one input field: its
// message is the field, a colon and the formatted text.
func FieldErrorf(field, format string, args ...any) *Error {
	return &Error{Code: EINVALID, Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// InField places an EINVALID error found inside a part of the input under
// that part's field: "url: required" inside "stages[0].config" becomes
// "stages[0].config: url: required" with Field "stages[0].config.url".
// Other errors are returned wrapped with the field as context.
func InField(field string, err error) error {
	var e *Error
	if !errors.As(err, &e) || e.Code != EINVALID {
		return fmt.Errorf("%s: %w", field, err)
	}
	path := field
	if e.Field != "" {
		path += "." + e.Field
	}
	return &Error{Code: EINVALID, Field: path, Message: field + ": " + e.Message}
}

// ErrorField returns the Field of the first *Error in err's chain, or "".
func ErrorField(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL
// for any other error and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the message of the first *Error in err's chain, or
// "internal error" for other errors, which are logged rather than shown.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// ErrNotFound is returned by stores when a row does not exist; wrap it in an
// *Error with ENOTFOUND for people.
var ErrNotFound = errors.New("not found")

// IsNotFound reports whether err means "no such thing".
func IsNotFound(err error) bool {
	return errors.Is(err, ErrNotFound) || ErrorCode(err) == ENOTFOUND
}
