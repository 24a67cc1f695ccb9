package dependents_test

import (
	"testing"

	"github.com/migrate-unique/migrate-unique/testdata/legacy"
)

func TestTriggerPassingTheKeyColumnsNameIsRefused(t *testing.T) {
	url := queue(t, legacy.SingleTable, `
CREATE FUNCTION blank_to_null() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF to_jsonb(NEW)->>TG_ARGV[0] = '' THEN
        NEW := jsonb_populate_record(NEW, jsonb_build_object(TG_ARGV[0], NULL));
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER key_blank_to_null BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION blank_to_null('unique_key');`)
	expectRefused(t, url, legacy.SingleTable, `trigger "key_blank_to_null" on "public"."jobs" passes 'unique_key' to its function`)
}
