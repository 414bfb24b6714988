package orchestrator

import (
	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/store"
)

// failureClasses is the one mapping of hostctl's failure classes to the store's. The store has two
// classes more, which only the orchestrator gives: interrupted (a point put back to pending) and
// output_mismatch (the output check, orchestrator/outcheck.go).
var failureClasses = map[hostctl.Class]store.FailureClass{
	hostctl.ClassBadArgs:            store.FailBadArgs,
	hostctl.ClassOOM:                store.FailOOM,
	hostctl.ClassCrashDuringStart:   store.FailCrashDuringStart,
	hostctl.ClassCrashDuringLoad:    store.FailCrashDuringLoad,
	hostctl.ClassStopTimeoutSIGKILL: store.FailStopTimeoutSigkill,
	hostctl.ClassRestartLoop:        store.FailRestartLoop,
	hostctl.ClassReadyTimeout:       store.FailReadyTimeout,
	hostctl.ClassHostUnreachable:    store.FailHostUnreachable,
	hostctl.ClassGPUBusy:            store.FailGPUBusy,
	hostctl.ClassLaunchFailed:       store.FailLaunchFailed,
}

// storeClass is the store's class of a hostctl failure. A class this table does not know (one
// added to hostctl only) fails the point as fallback, the phase it happened in, instead of making
// FinishPoint refuse it and end the whole sweep; the failure detail keeps hostctl's words.
func storeClass(c hostctl.Class, fallback store.FailureClass) store.FailureClass {
	if s, ok := failureClasses[c]; ok {
		return s
	}
	return fallback
}
