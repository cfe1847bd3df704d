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
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with the given code.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
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
