package main

import (
	"testing"

	"github.com/ckernel/playerdata/testsupport"
)

// cliSuite are the tests of every operator verb, each run on one Redis
// (TestCLI) and on a three-master Redis Cluster reached through one node's
// plain URL (TestClusterCLI), each in a fresh namespace.
var cliSuite = []struct {
	name string
	fn   func(t *testing.T, e testEnv)
}{
	{"Inspect", testInspect},
	{"InspectData", testInspectData},
	{"InspectCorrupt", testInspectCorrupt},
	{"InspectShowsTheInbox", testInspectShowsTheInbox},
	{"InspectTellsMessageStates", testInspectTellsMessageStates},
	{"InspectShowsRefusalsAndDeadLetters", testInspectShowsRefusalsAndDeadLetters},
	{"InspectNamesDamagedVersions", testInspectNamesDamagedVersions},
	{"InspectAndRestoreWholeTextVersions", testInspectAndRestoreWholeTextVersions},
	{"Presence", testPresence},
	{"PresenceShowsSessions", testPresenceShowsSessions},
	{"PresenceKey", testPresenceKey},
	{"PresenceShardsAreFound", testPresenceShardsAreFound},
	{"UnknownPresenceSaysWhy", testUnknownPresenceSaysWhy},
	{"MistypedNamespace", testMistypedNamespace},
	{"MistypedDriver", testMistypedDriver},
	{"MistypedJob", testMistypedJob},
	{"Locks", testLocks},
	{"LocksScanIsBounded", testLocksScanIsBounded},
	{"Where", testWhere},
	{"WhereOfACrashedHolder", testWhereOfACrashedHolder},
	{"UnlockRefusesALiveHolder", testUnlockRefusesALiveHolder},
	{"UnlockFreesACrashedHoldersLock", testUnlockFreesACrashedHoldersLock},
	{"UnlockOfAnUnknownHolder", testUnlockOfAnUnknownHolder},
	{"UnlockRefusals", testUnlockRefusals},
	{"UnlockWhenTheLockMovesMeanwhile", testUnlockWhenTheLockMovesMeanwhile},
	{"UnlockFindsTheDriver", testUnlockFindsTheDriver},
	{"SendIsAppliedAtOnceByALiveHolder", testSendIsAppliedAtOnceByALiveHolder},
	{"SendToServersThatRequireARequestKey", testSendToServersThatRequireARequestKey},
	{"SendWithoutNATSWaitsForTheHoldersNextSave", testSendWithoutNATSWaitsForTheHoldersNextSave},
	{"SendToAnIdleProfileIsAppliedByTheNextJoin", testSendToAnIdleProfileIsAppliedByTheNextJoin},
	{"SendBeyondMaxInboxStoresNothing", testSendBeyondMaxInboxStoresNothing},
	{"SendRefusesWhatItCannotSend", testSendRefusesWhatItCannotSend},
	{"SendTwiceWithAnIdempotencyKey", testSendTwiceWithAnIdempotencyKey},
	{"RestoreDryRunChangesNothing", testRestoreDryRunChangesNothing},
	{"RestoreBringsBackAnOlderVersion", testRestoreBringsBackAnOlderVersion},
	{"RestoreOfACorruptRecord", testRestoreOfACorruptRecord},
	{"RestoreTakesTheLockLikeAnyLoad", testRestoreTakesTheLockLikeAnyLoad},
	{"RestoreKeepsToTheRecordsSchema", testRestoreKeepsToTheRecordsSchema},
	{"ReplayDeadLetters", testReplayDeadLetters},
	{"ReplayOfARefusedWaitingMessage", testReplayOfARefusedWaitingMessage},
	{"RepairMakesABrokenRecordLoad", testRepairMakesABrokenRecordLoad},
}

// TestCLI runs cliSuite on one Redis.
func TestCLI(t *testing.T) {
	for _, tc := range cliSuite {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newTestEnv(t)) })
	}
}

// TestClusterCLI runs cliSuite on one Redis Cluster of three masters (a
// namespace each). CI fails when it skips (.ci/run's pattern matches
// TestCluster).
func TestClusterCLI(t *testing.T) {
	c := testsupport.StartRedisCluster(t)
	for _, tc := range cliSuite {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newClusterEnv(t, c)) })
	}
}
