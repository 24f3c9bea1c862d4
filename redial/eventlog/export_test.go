package eventlog

// Fields is fields, for tests.
var Fields = fields
