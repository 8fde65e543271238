-- Stop the document-frequency log: delete it and move its sequence on by
-- one with no entry, so a node still following it sees a gap when it
-- starts again (writes were not logged meanwhile) and recounts.
-- KEYS[1] the log, KEYS[2] its sequence.
redis.call('UNLINK', KEYS[1])
return redis.call('INCR', KEYS[2])
