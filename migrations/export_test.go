package migrations

// PlainJobsRebuildForTest exposes plain-jobs' known unique rule to the tests.
const PlainJobsRebuildForTest = plainJobsRebuild
