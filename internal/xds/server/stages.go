package server

import "time"

// Stage is a stage of one push, from an EnvoyConfig's write as the
// informer saw it to the last response of the new revision handed to a
// proxy's stream: the label of kube_envoy_controller_xds_push_stage_seconds.
type Stage string

// The stages of a push, in order. The leader's reconcile that records a new
// revision times its phases (PushTimer); the server times the fan-out.
const (
	// StageQueue: from the informer's event of an EnvoyConfig's write
	// (the watch's handler, which queues the fleet) to the start of the
	// reconcile that takes the fleet off the queue.
	StageQueue Stage = "queue"
	// StageRead: the fleet's world read (the cache, the replicas' history
	// read back).
	StageRead Stage = "read"
	// StageTranslate: the EnvoyConfigs translated into the fleet's IR.
	StageTranslate Stage = "translate"
	// StageJudge: the real Envoy's load of content no revision holds, and
	// the translation again with its verdicts.
	StageJudge Stage = "judge"
	// StageReports: the replicas' reports of their proxies read.
	StageReports Stage = "reports"
	// StageRecord: the decision, and the history written to the API server.
	StageRecord Stage = "record"
	// StageServe: the revision rendered and published to this replica's
	// server (SetFleet, SetFleetRollout).
	StageServe Stage = "serve"
	// StageStatus: the EnvoyConfigs' status reported.
	StageStatus Stage = "status"
	// StageFanout: from the publication's start (SetFleet) to the last
	// response of the new version handed to a stream, observed once every
	// connected proxy of the fleet accepted the version.
	StageFanout Stage = "fanout"
)

// reconcileStages are the stages a PushTimer times, in order.
var reconcileStages = [...]Stage{StageQueue, StageRead, StageTranslate, StageJudge, StageReports, StageRecord, StageServe, StageStatus}

// PushTimer times the stages of one reconcile as wall time, one lap each:
// Mark ends the lap of a stage, Skip one that is no stage. Observe
// observes each stage marked, once, in
// kube_envoy_controller_xds_push_stage_seconds; a reconcile that records
// no new revision observes nothing. A PushTimer is used by one goroutine.
type PushTimer struct {
	now         func() time.Time
	start, last time.Time
	took        [len(reconcileStages)]time.Duration // by index in reconcileStages
	marked      [len(reconcileStages)]bool
}

// StartPush returns a timer whose first lap starts now.
func StartPush() *PushTimer { return startPush(time.Now) }

func startPush(now func() time.Time) *PushTimer {
	t := &PushTimer{now: now}
	t.start = now()
	t.last = t.start
	return t
}

// Queued records the queue stage: from at, when the event that queued the
// reconcile came, to the timer's start.
func (t *PushTimer) Queued(at time.Time) {
	if d := t.start.Sub(at); d >= 0 {
		t.add(StageQueue, d)
	}
}

// Mark ends the lap of stage s: it took the time since the last lap ended.
// A stage marked twice took both laps.
func (t *PushTimer) Mark(s Stage) {
	now := t.now()
	t.add(s, now.Sub(t.last))
	t.last = now
}

// Skip ends a lap that is no stage's.
func (t *PushTimer) Skip() { t.last = t.now() }

func (t *PushTimer) add(s Stage, d time.Duration) {
	for i, r := range reconcileStages {
		if r == s {
			t.took[i] += d
			t.marked[i] = true
			return
		}
	}
}

// Took returns how long stage s took, and whether it was marked.
func (t *PushTimer) Took(s Stage) (time.Duration, bool) {
	for i, r := range reconcileStages {
		if r == s {
			return t.took[i], t.marked[i]
		}
	}
	return 0, false
}

// Observe observes each stage marked, once.
func (t *PushTimer) Observe() {
	for i, s := range reconcileStages {
		if t.marked[i] {
			metricPushStage.WithLabelValues(string(s)).Observe(t.took[i].Seconds())
		}
	}
}
