package migrations

// PlainJobsRebuildForTest exposes plain-jobs' known unique rule to the tests.
const PlainJobsRebuildForTest = plainJobsRebuild

// SkipProbeQueryForTest exposes the question down's skip-metadata step asks
// through its probe index.
var SkipProbeQueryForTest = skipProbeQuery
