// Package v1 holds copies of the Kubernetes types (meta/v1, core/v1, batch/v1, and the intstr,
// resource and types helpers) reachable from an Argo Rollouts AnalysisRun, with the original
// type names, field names and field types, in a package named like the originals so that gob
// spells composite type names ("[]v1.OwnerReference") the same way.
package v1

import "time"

// Time mirrors metav1.Time. It embeds time.Time, whose GobEncode/GobDecode methods are promoted,
// so gob sends it as an opaque GobEncoder blob (time.Time's MarshalBinary form), exactly as the
// controller's metav1.Time does.
type Time struct {
	time.Time
}

// NewTime wraps t.
func NewTime(t time.Time) Time { return Time{t} }

// NewTimePtr wraps t and returns a pointer, the form Measurement uses.
func NewTimePtr(t time.Time) *Time { return &Time{t} }

// Type mirrors intstr.Type.
type Type int64

// IntOrString type values.
const (
	Int Type = iota
	String
)

// IntOrString mirrors intstr.IntOrString (a plain struct on the gob wire).
type IntOrString struct {
	Type   Type
	IntVal int32
	StrVal string
}

// FromInt returns an IntOrString holding an int.
func FromInt(v int) IntOrString { return IntOrString{Type: Int, IntVal: int32(v)} }

// FromString returns an IntOrString holding a string.
func FromString(s string) IntOrString { return IntOrString{Type: String, StrVal: s} }

// IntOrStringPtr returns a pointer to FromInt(v).
func IntOrStringPtr(v int) *IntOrString { x := FromInt(v); return &x }

// Format mirrors resource.Format.
type Format string

// Quantity mirrors resource.Quantity. Its value lives in unexported fields and it implements
// neither GobEncoder nor BinaryMarshaler, so gob sees a struct whose only exported field is the
// embedded Format: a ResourceList travels as map[string]struct{Format string}, and the amount
// itself is lost. That is what the real controller sends, so it is reproduced here.
type Quantity struct {
	s string
	Format
}

// MustParseQuantity records the text (kept only in memory, as the real type does) and a format.
func MustParseQuantity(s string) Quantity {
	f := Format("DecimalSI")
	if len(s) > 2 && s[len(s)-1] == 'i' {
		f = "BinarySI"
	}
	return Quantity{s: s, Format: f}
}

// String returns the text the quantity was made from.
func (q Quantity) String() string { return q.s }

// TypeMeta mirrors metav1.TypeMeta.
type TypeMeta struct {
	Kind       string
	APIVersion string
}
