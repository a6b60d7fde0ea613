/**
 * Australian Business Number check, as published by the Australian Business
 * Register ("ABN format"): subtract 1 from the first digit, weight the 11
 * digits by 10, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, and the sum must be a
 * multiple of 89. Spaces (as in "51 824 753 556") are accepted and removed.
 */
const WEIGHTS = [10, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19] as const;

/** The 11-digit ABN, or the reason it is not one. */
export function parseAbn(raw: string): { abn: string } | { problem: string } {
  const abn = raw.replace(/ /g, '');
  if (!/^\d{11}$/.test(abn)) return { problem: 'abn: must be 11 digits' };
  if (!isValidAbnChecksum(abn)) return { problem: 'abn: fails the ABN checksum' };
  return { abn };
}

export function isValidAbnChecksum(abn: string): boolean {
  if (abn[0] === '0') return false;
  let sum = 0;
  for (let i = 0; i < 11; i++) sum += (Number(abn[i]) - (i === 0 ? 1 : 0)) * WEIGHTS[i]!;
  return sum % 89 === 0;
}
