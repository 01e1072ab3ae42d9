-- Content hashes are now computed from the parsed jsonb (jsonb_hash_extended of the object without
-- its volatile URL fields, and of its source data) instead of md5 of their text, which cost Postgres
-- a fifth of every page's write (mirror/records-store.ts). Records already mirrored get the new hash
-- of what they hold, so the next pass finds them unchanged rather than rewriting them all.
UPDATE records
   SET hash = (lpad(to_hex(jsonb_hash_extended(
                 data - (CASE
                           WHEN resource = 'photos' THEN ARRAY['file_url', 'preview_url']
                           WHEN resource IN ('drawings', 'drawing-versions', 'documents', 'specification-sections', 'files', 'file-versions') THEN ARRAY['url', 'preview_url']
                           ELSE '{}'::text[]
                         END), 0)), 16, '0')
               || lpad(to_hex(jsonb_hash_extended(coalesce(source_data, 'null'::jsonb), 0)), 16, '0'))::uuid;
