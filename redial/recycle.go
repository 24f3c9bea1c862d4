package redial

import "time"

// recyclePolicy says when a plugin is replaced by a planned replacement;
// zero fields disable their rule.
type recyclePolicy struct {
	calls uint64        // after this many calls served
	age   time.Duration // once older than this
	rss   uint64        // once its resident memory exceeds this many bytes
	every time.Duration // how often age and rss are checked
}
